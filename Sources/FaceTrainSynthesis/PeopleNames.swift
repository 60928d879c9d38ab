/// Made-up names and job titles for the people of a synthetic data set.
enum PeopleNames {
    static let firstNames = [
        "Amara", "Ben", "Carla", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi", "Lars",
        "Maya", "Nikhil", "Olga", "Pedro", "Quinn", "Rosa", "Samir", "Tara", "Umar", "Vera", "Wei", "Ximena",
        "Yusuf", "Zoe", "Aiko", "Bruno", "Chloe", "Diego", "Esther", "Felix", "Hana", "Ivan", "Julia", "Kofi",
        "Leila", "Marco", "Nadia", "Oscar", "Priya", "Rafael", "Sofia", "Tomas", "Ulla", "Victor", "Yara", "Zane",
    ]
    static let lastNames = [
        "Adeyemi", "Berg", "Castillo", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ivanova", "Jensen",
        "Kowalski", "Lindqvist", "Moreau", "Nakamura", "Okafor", "Petrov", "Quispe", "Rossi", "Schmidt", "Tanaka",
        "Ueda", "Varga", "Weber", "Xu", "Yilmaz", "Zhang", "Almeida", "Brennan", "Chowdhury", "Duarte", "Engel",
        "Ferreira", "Gallagher", "Horvath", "Iqbal", "Jovanovic", "Kim", "Laurent", "Mensah", "Novak", "Ortiz",
        "Patel", "Reyes", "Silva", "Takahashi", "Vos", "Wright", "Young",
    ]
    static let positions = [
        "Software Engineer", "Product Manager", "Office Manager", "Accountant", "Sales Representative",
        "Data Analyst", "UX Designer", "Receptionist", "HR Specialist", "Marketing Lead", "Support Engineer",
        "Facilities Coordinator", "Chief Financial Officer", "Legal Counsel", "QA Engineer", "Team Lead",
        "Security Officer", "Research Scientist", "Intern", "Operations Manager", "Technical Writer",
        "Account Executive", "IT Administrator", "Logistics Planner", "Executive Assistant", "Architect",
        "Procurement Officer", "Community Manager", "Backend Developer", "Head of Design",
    ]
}
